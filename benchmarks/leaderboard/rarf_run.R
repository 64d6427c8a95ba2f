# R arf 0.2.4 for the leaderboard: fit, held-out log-likelihood, fitted parameters and a synthetic sample.
# usage: R_LIBS=LIBDIR Rscript rarf_run.R TRAIN.csv TEST.csv OUTDIR [NUM_TREES] [MIN_NODE_SIZE] [SEED]
#                                         [N_SYNTH] [ALPHA]
# The same steps and figures as shared/peers/rarf/arf_run.R (adversarial_rf -> forde -> lik -> forge,
# single-threaded, same sample; ll_official = arf::lik() as shipped, ll_normalised = lik() without the
# filter that drops a leaf's zero factor). It also writes the fitted forde parameters, so that the model
# can be scored on another base measure (benchmarks/leaderboard/rarf_cells.py):
#   OUTDIR/params_cnt.csv (f_idx, variable, min, max, mu, sigma: each leaf's truncated normals),
#   OUTDIR/params_cat.csv (f_idx, variable, val, prob), OUTDIR/params_forest.csv (f_idx, tree, cvg),
#   OUTDIR/test_as_read.csv (the test rows as R read them: column names and levels as in the params).
suppressMessages({library(arf); library(data.table)})
a <- commandArgs(trailingOnly = TRUE)
if (length(a) < 3) stop("usage: rarf_run.R TRAIN.csv TEST.csv OUTDIR [NUM_TREES] [MIN_NODE_SIZE] [SEED] [N_SYNTH] [ALPHA]")
opt <- function(i, d) if (length(a) >= i && a[i] != "default") a[i] else d
outdir <- a[3]; dir.create(outdir, showWarnings = FALSE, recursive = TRUE)
seed <- as.integer(opt(6, "0")); alpha <- as.numeric(opt(8, "0"))
data.table::setDTthreads(1)
trn <- read.csv(a[1], stringsAsFactors = FALSE, na.strings = c("", "NA"))
tst <- read.csv(a[2], stringsAsFactors = FALSE, na.strings = c("", "NA"))
for (c in names(trn)) if (is.character(trn[[c]]) || is.logical(trn[[c]])) {
  lv <- sort(unique(na.omit(as.character(trn[[c]]))))
  trn[[c]] <- factor(as.character(trn[[c]]), levels = lv); tst[[c]] <- factor(as.character(tst[[c]]), levels = lv)
}
n_synth <- as.integer(opt(7, as.character(nrow(trn))))
src <- deparse(arf::lik)
src <- gsub("psi_cnt[lik > 0, .(f_idx, obs,", "psi_cnt[, .(f_idx, obs,", src, fixed = TRUE)
src <- gsub("psi_cat[lik > 0, .(f_idx, obs,", "psi_cat[, .(f_idx, obs,", src, fixed = TRUE)
lik_normalised <- eval(parse(text = src)); environment(lik_normalised) <- asNamespace("arf")
set.seed(seed)
argl <- list(x = trn, verbose = FALSE, parallel = FALSE)
if (length(a) >= 4 && a[4] != "default") argl$num_trees <- as.integer(a[4])
if (length(a) >= 5 && a[5] != "default") argl$min_node_size <- as.integer(a[5])
tm <- function(expr) { t0 <- proc.time()[["elapsed"]]; v <- expr; list(v = v, s = proc.time()[["elapsed"]] - t0) }
f <- tm(do.call(adversarial_rf, argl))
p <- tm(forde(f$v, trn, parallel = FALSE, alpha = alpha))
l1 <- tm(lik(p$v, tst, arf = f$v, parallel = FALSE))
l2 <- lik_normalised(p$v, tst, arf = f$v, parallel = FALSE)
g <- tm(forge(p$v, n_synth, parallel = FALSE, verbose = FALSE))
fwrite(data.table(ll_official = l1$v, ll_normalised = l2), file.path(outdir, "test_ll.csv"))
fwrite(p$v$cnt[, .(f_idx, variable, min, max, mu, sigma)], file.path(outdir, "params_cnt.csv"))
fwrite(p$v$cat[, .(f_idx, variable, val, prob)], file.path(outdir, "params_cat.csv"))
fwrite(p$v$forest[, .(f_idx, tree, cvg)], file.path(outdir, "params_forest.csv"))
fwrite(tst, file.path(outdir, "test_as_read.csv"))
fwrite(g$v, file.path(outdir, "synth.csv"))
num <- function(x) if (is.na(x)) "null" else if (is.finite(x)) sprintf("%.6f", x) else sprintf("\"%s\"", x)
cat(sprintf(paste0('{"peer": "R arf %s (ranger %s, %s)", "num_trees": %d, "min_node_size": %s, "alpha": %s, "seed": %d, ',
  '"n_train": %d, "n_test": %d, "t_fit": %.3f, "t_forde": %.3f, "t_lik": %.3f, "t_forge": %.3f, "n_synth": %d, ',
  '"test_ll_official": %s, "test_ll_normalised": %s, "n_neg_inf_normalised": %d}\n'),
  format(packageVersion("arf")), format(packageVersion("ranger")), R.version.string, f$v$num.trees,
  opt(5, "2"), alpha, seed, nrow(trn), nrow(tst), f$s, p$s, l1$s, g$s, n_synth,
  num(mean(l1$v)), num(mean(l2)), sum(!is.finite(l2))), file = file.path(outdir, "result.json"))
cat(readLines(file.path(outdir, "result.json")), sep = "\n")
