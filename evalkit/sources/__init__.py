"""Reading the world (trusted; nothing here runs submission code): text files, submissions on disk,
problem folders and their settings, scaffolding and KernelBench import."""
