//! Slurm configuration model and renderer (being written).
