"""kafkasim: broker."""
