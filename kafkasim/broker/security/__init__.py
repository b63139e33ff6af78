"""Security as Kafka has it: listeners (listeners, advertised.listeners,
listener.security.protocol.map, inter.broker.listener.name), TLS settings from Kafka's ssl.*
configs, and SASL (SaslHandshake / SaslAuthenticate, PLAIN and SCRAM-SHA-256/512, KIP-368
re-authentication). The socket server runs one ChannelAuthenticator per connection; the
authorizer and quotas (other modules of this package) read the principal it establishes from the
RequestContext."""
