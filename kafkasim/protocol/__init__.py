"""kafkasim.protocol: Kafka's wire protocol as pure code (bytes <-> objects, no I/O).

- ``messages/``   generated from Kafka 3.9.1's JSON definitions by ``codegen.py`` (committed; do
                  not edit): one module per API pair (``messages.produce.ProduceRequest`` /
                  ``ProduceResponse``), ``messages.headers`` (RequestHeader, ResponseHeader),
                  ``messages.consumer_protocol`` and ``messages.consumer_offsets``.
                  ``obj.encode(version) -> bytes``; ``Cls.decode(buf, version) -> Cls``.
- ``api``         registry (``API_BY_KEY``, ``API_BY_NAME``), api-key constants, header versions.
- ``framing``     request/response frames, ``decode_request``, ``encode_response``, the
                  ApiVersions error-35 reply.
- ``errors``      Kafka error codes; ``ProtocolError`` / ``UnsupportedVersionError``.
- ``primitives``  byte layouts and the runtime the generated code uses.
"""
