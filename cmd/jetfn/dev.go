package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jetfn/jetfn/devstack"
)

// cmdDev starts the embedded stack and the runtime in one process. Its data
// lives under --dir and survives restarts: streams, consumer positions, the
// duplicate memory and documents are all there after Ctrl-C and a new start.
func cmdDev(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("dev", "dev [--fresh] [--dir .jetfn] [--nats-port 4222] [--mongo-port 27017] [--manifest FILE]", errOut)
	dir := fs.String("dir", ".jetfn", "directory for the servers' data")
	fresh := fs.Bool("fresh", false, "wipe --dir before starting")
	natsPort := fs.Int("nats-port", 4222, "NATS client port")
	mongoPort := fs.Int("mongo-port", 27017, "MongoDB wire-protocol port")
	path := fs.String("manifest", "manifests/local.yaml", "manifest to run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	for flagName, port := range map[string]int{"--nats-port": *natsPort, "--mongo-port": *mongoPort} {
		if err := portFree(port); err != nil {
			return usageError(fmt.Errorf("%s %d: %w", flagName, port, err))
		}
	}
	if *fresh {
		if err := os.RemoveAll(*dir); err != nil {
			return fmt.Errorf("wiping %s: %w", *dir, err)
		}
	}
	ns, err := devstack.StartNATS(devstack.NATSOptions{Port: *natsPort, StoreDir: filepath.Join(*dir, "nats")})
	if err != nil {
		return err
	}
	defer devstack.StopNATS(ns)
	mongoSrv, err := devstack.StartMongo(net.JoinHostPort("127.0.0.1", strconv.Itoa(*mongoPort)), filepath.Join(*dir, "mongo"))
	if err != nil {
		return err
	}
	defer mongoSrv.Stop()
	cfg.NATSURL, cfg.MongoURI, cfg.Manifest = ns.ClientURL(), mongoSrv.URI, *path
	fmt.Fprintf(out, "NATS_URL=%s\nMONGO_URI=%s\n", cfg.NATSURL, cfg.MongoURI)
	return serve(ctx, cfg, cfg.newLogger(errOut), func() { fmt.Fprintln(out, "ready") })
}

// portFree reports a taken port before any server starts, so the user gets
// one clear line instead of a half-started stack.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port is taken: %w", err)
	}
	return l.Close()
}
