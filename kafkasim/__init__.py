"""kafkasim: a Kafka-compatible broker, in a deterministic simulation or on real sockets."""

from kafkasim.runtime import native as _native

# Before any other kafkasim module loads: the compiled build of the hot modules, when present
# and fresh (kafkasim/runtime/native.py says when; KAFKASIM_NATIVE=0 keeps everything pure).
_native.install()
