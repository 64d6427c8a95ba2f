#!/bin/bash
# issue 35 shell session: three public CSV files (vega_datasets, written by prep.py) with a
# date column, NaN and integers: fit, sample, score, evaluate; then the same through --schema
set -u
export PYTHONPATH=/work/wt/everyday
fg() { echo "\$ forestgen $*"; /work/main/.venv/bin/python -m forestgen "$@"; echo "[exit $?]"; }
for spec in "seattle-weather date" "cars Year" "la-riots death_date"; do
  set -- $spec; t=$1; d=$2
  echo "================ $t"
  fg fit $t.csv --out $t.forestgen --seed 0 --no-progress
  fg sample $t.forestgen -n 2000 --out $t.synth.csv --seed 1 --no-progress
  fg score $t.forestgen $t.test.csv
  fg evaluate $t.csv $t.synth.csv --holdout $t.test.csv --out $t.report.md
  /work/main/.venv/bin/python check.py $t $d
  echo "---------------- $t through --schema schema-$t.json"
  fg fit $t.csv --schema schema-$t.json --out $t.schema.forestgen --seed 0 --no-progress
  fg sample $t.schema.forestgen -n 2000 --out $t.synth.csv --seed 1 --no-progress
  fg score $t.schema.forestgen $t.test.csv
  /work/main/.venv/bin/python check.py $t $d
done
echo "================ bad input"
printf 'temp,day\n1.5,2020-01-01\n2.0,2020-01-02\nx,2020-01-03\n' > stray.csv
for i in $(seq 30); do echo "3.$i,2020-02-0$((i % 9 + 1))" >> stray.csv; done
fg fit stray.csv --out stray.forestgen
head -1 cars.csv > header-only.csv
fg score cars.forestgen header-only.csv
cut -d, -f1-3 cars.test.csv > three-columns.csv
fg score cars.forestgen three-columns.csv
fg score cars.forestgen three-columns.csv --marginalise
fg sample cars.forestgen -n 1000000000000
printf 'garbage' > damaged.forestgen
fg sample damaged.forestgen -n 5
