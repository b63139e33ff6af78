"""kafkasim: kafkasim."""
