// Package devstack starts the embedded servers behind `jetfn dev` and the
// tests: a nats-server with JetStream and a MongoDB-compatible FerretDB,
// both keeping their data in a directory so a restart finds it again.
package devstack
