"""The asyncio runtime: the same cores as the simulator, on real UDP sockets in emulated hosts."""
