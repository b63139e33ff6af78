"""Security as Kafka has it: who a request comes from (authentication) and what it may do
(authorization). Listeners (listeners, advertised.listeners, listener.security.protocol.map,
inter.broker.listener.name), TLS settings from Kafka's ssl.* configs, and SASL (SaslHandshake /
SaslAuthenticate, PLAIN and SCRAM-SHA-256/512, KIP-368 re-authentication): the socket server runs
one ChannelAuthenticator per connection. The authorizer (AclAuthorizer's semantics, ACLs in
ZooKeeper) and its per-API rules read the principal it establishes from the RequestContext."""
