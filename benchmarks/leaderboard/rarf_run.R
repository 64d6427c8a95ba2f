# R arf 0.2.4 for the leaderboard: fit, held-out log-likelihood (three ways) and a synthetic sample.
# usage: R_LIBS=LIBDIR Rscript rarf_run.R TRAIN.csv TEST.csv OUTDIR [NUM_TREES] [MIN_NODE_SIZE] [SEED]
#                                         [N_SYNTH] [ALPHA] [GRID.csv]
# The same steps and figures as shared/peers/rarf/arf_run.R (adversarial_rf -> forde -> lik -> forge,
# single-threaded; ll_official = arf::lik() as shipped, ll_normalised = lik() without the filter that
# drops a leaf's zero factor), plus one figure on forestgen's base measure:
#
# ll_grid: GRID.csv has the shape of TEST.csv; a cell > 0 is the half-width h of the grid cell of that
# held-out value (a value forestgen scores as a probability mass: an integer coded as levels, a point
# mass of a discrete-valued column). For those cells the leaf's factor is the probability of the cell,
# P(x - h < X <= x + h) under the leaf's truncated normal (ptruncnorm differences), instead of the
# density at x, which a narrow leaf inflates without bound. Cells of 0 keep the density. Columns forestgen
# codes as level pmfs hold only grid values, so there ll_grid is a normalised probability; at a point mass
# inside an otherwise continuous column it slightly favours R arf (the density elsewhere still counts the
# cell's mass). Without GRID.csv, ll_grid is not reported.
suppressMessages({library(arf); library(data.table)})
a <- commandArgs(trailingOnly = TRUE)
if (length(a) < 3) stop("usage: rarf_run.R TRAIN.csv TEST.csv OUTDIR [NUM_TREES] [MIN_NODE_SIZE] [SEED] [N_SYNTH] [ALPHA] [GRID.csv]")
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
# the grid variant: after the continuous factors are computed, replace the density of each grid cell
hook <- "psi_cnt[value == min, `:=`(lik, 0)]"
if (sum(grepl(hook, src, fixed = TRUE)) != 1) stop("arf::lik() changed: grid hook not found")
src_grid <- sub(hook, paste("psi_cnt <- .grid_mass(psi_cnt);", hook), src, fixed = TRUE)
grid_env <- new.env(parent = asNamespace("arf"))
lik_grid <- eval(parse(text = src_grid)); environment(lik_grid) <- grid_env
grid <- if (length(a) >= 9 && a[9] != "none") read.csv(a[9]) else NULL
if (!is.null(grid)) {
  names(grid) <- names(tst)
  gl <- melt(data.table(obs = seq_len(nrow(grid)), grid), id.vars = "obs", variable.factor = FALSE,
            value.name = "half")
  gl <- gl[half > 0]
  grid_env$.grid_mass <- function(psi) {
    psi <- merge(psi, gl, by = c("obs", "variable"), all.x = TRUE, sort = FALSE)
    psi[!is.na(half), lik := truncnorm::ptruncnorm(value + half, a = min, b = max, mean = mu, sd = sigma) -
                             truncnorm::ptruncnorm(value - half, a = min, b = max, mean = mu, sd = sigma)]
    psi[, half := NULL]
    psi
  }
}
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
# after forge: lik() draws ranger's prediction seed from R's RNG, so forge sees the same stream as
# in arf_run.R and gives the same sample
l3 <- if (!is.null(grid)) lik_grid(p$v, tst, arf = f$v, parallel = FALSE) else rep(NA_real_, nrow(tst))
fwrite(data.table(ll_official = l1$v, ll_normalised = l2, ll_grid = l3), file.path(outdir, "test_ll.csv"))
fwrite(g$v, file.path(outdir, "synth.csv"))
num <- function(x) if (is.na(x)) "null" else if (is.finite(x)) sprintf("%.6f", x) else sprintf("\"%s\"", x)
cat(sprintf(paste0('{"peer": "R arf %s (ranger %s, %s)", "num_trees": %d, "min_node_size": %s, "alpha": %s, "seed": %d, ',
  '"n_train": %d, "n_test": %d, "t_fit": %.3f, "t_forde": %.3f, "t_lik": %.3f, "t_forge": %.3f, "n_synth": %d, ',
  '"test_ll_official": %s, "test_ll_normalised": %s, "n_neg_inf_normalised": %d, "test_ll_grid": %s, ',
  '"n_grid_cells": %d}\n'),
  format(packageVersion("arf")), format(packageVersion("ranger")), R.version.string, f$v$num.trees,
  opt(5, "2"), alpha, seed, nrow(trn), nrow(tst), f$s, p$s, l1$s, g$s, n_synth,
  num(mean(l1$v)), num(mean(l2)), sum(!is.finite(l2)), num(mean(l3)),
  if (is.null(grid)) 0L else nrow(gl)), file = file.path(outdir, "result.json"))
cat(readLines(file.path(outdir, "result.json")), sep = "\n")
