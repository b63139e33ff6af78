"""kafkasim: cluster."""
