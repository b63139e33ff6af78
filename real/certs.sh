#!/usr/bin/env bash
# real/certs.sh DIR — throwaway TLS material for tests (never for production):
#   DIR/ca.pem, ca.key                    a self-signed CA (30 days)
#   DIR/broker.pem, broker.key            the broker's certificate, for 127.0.0.1 and localhost, signed by the CA
#   DIR/broker-keystore.pem               broker.key + broker.pem in one file (Kafka's ssl.keystore.type=PEM
#                                         ssl.keystore.location form)
#   DIR/client.pem, client.key            a client certificate (CN=client,O=kafkasim) for ssl.client.auth
#   DIR/client-keystore.pem               client.key + client.pem
# Keys are unencrypted PKCS#8 ("BEGIN PRIVATE KEY"), which Kafka's PEM keystore reads without ssl.key.password.
set -euo pipefail
dir=${1:?usage: real/certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 \
  -subj "/O=kafkasim/CN=kafkasim-test-ca" 2>/dev/null
sign() {  # sign NAME SUBJECT EXTENSIONS
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" -days 30 \
    -extfile "$1.ext" 2>/dev/null
  cat "$1.key" "$1.pem" > "$1-keystore.pem"
  rm -f "$1.csr" "$1.ext"
}
sign broker "/O=kafkasim/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1"
sign client "/O=kafkasim/CN=client" "extendedKeyUsage=clientAuth"
echo "$dir: ca.pem broker.pem broker.key broker-keystore.pem client.pem client.key client-keystore.pem"
