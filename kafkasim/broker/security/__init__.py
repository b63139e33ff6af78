"""Security: who a request comes from (authentication) and what it may do (authorization)."""
