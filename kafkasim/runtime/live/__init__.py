"""The live world: the simulated world paced to the wall clock, its brokers reachable by real
clients on 127.0.0.1 (pacing.py: the loop; bridge.py: real connections as simulated endpoints;
world.py: building one)."""
