"""kafkasim: client."""
