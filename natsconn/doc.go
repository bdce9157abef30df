// Package natsconn holds the NATS connection settings every jetfn command
// and publisher shares: credentials (a .creds file, an nkey seed,
// user/password or a token), TLS (CA, client certificate, handshake first)
// and the inbox prefix, read from NATS_* environment variables by the
// program that owns the environment and turned into nats.go options here,
// once, so no caller connects with fewer of them than another.
package natsconn
