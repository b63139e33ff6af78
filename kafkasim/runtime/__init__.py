"""The runtime seam: the only place that touches time, sockets, files, threads, ZooKeeper and
randomness. Import the interface from `kafkasim.runtime.api`; build worlds with
`kafkasim.runtime.sim.world.SimWorld` or `kafkasim.runtime.real.world.RealNode`."""
