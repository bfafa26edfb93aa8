"""Stage 2, data: the batch every task returns and per-step random streams (`data`), the offline
C4-format corpus (`corpus`) and its tokenization (`tokens`). The tasks themselves, one module
each, are `lengen.tasks`."""
