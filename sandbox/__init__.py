"""Worker subprocesses: spawn, timeouts, kill, environment scrubbing, GPU leases, the result channel."""
