"""Stage 4, train: one training life cycle (`lifecycle`: engine, batches, loss window, early
stop, MLflow runs, checkpoints and resume, the loop) and its two trainees, a run alone (`train`)
and a fused group of runs (`group`); the runtime around them (threads, devices, DeepSpeed:
`runtime`), the loss (`loss`) and the MLflow store's setup job (`tracking`)."""
