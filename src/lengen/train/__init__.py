"""Stage 4, train: the training loop (`train`), the runtime around it (threads, devices,
DeepSpeed: `runtime`) and MLflow tracking (`tracking`)."""
