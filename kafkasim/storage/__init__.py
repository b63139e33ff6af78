"""kafkasim: storage."""
