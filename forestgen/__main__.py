import sys

from forestgen.cli import main

sys.exit(main())
