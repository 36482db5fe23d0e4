"""chunktune: choose the thread-pool chunk_size of MuJoCo batched rollouts by measurement."""
