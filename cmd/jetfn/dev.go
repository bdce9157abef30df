package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetfn/jetfn/devstack"
)

// cmdDev starts the embedded stack and the runtime in one process. Its data
// lives under --dir and survives restarts: streams, consumer positions, the
// duplicate memory and documents are all there after Ctrl-C and a new start.
// One stack at a time holds a directory.
func cmdDev(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("dev", "dev [--fresh] [--dir .jetfn] [--nats-port 4222] [--mongo-port 27017] [--console-port 7333|--no-console] [--manifest FILE] [--exit-with-parent]", errOut)
	dirPath := fs.String("dir", ".jetfn", "directory for the servers' data")
	fresh := fs.Bool("fresh", false, "wipe --dir before starting")
	natsPort := fs.Int("nats-port", 4222, "NATS client port")
	mongoPort := fs.Int("mongo-port", 27017, "MongoDB wire-protocol port")
	path := fs.String("manifest", "manifests/local.yaml", "manifest to run")
	withParent := fs.Bool("exit-with-parent", false, "drain and exit when the process that started this one exits (Linux; `go tool task run` sets it)")
	consolePort := fs.Int("console-port", defaultConsolePort, "web console port on 127.0.0.1 (when the default is taken, any free port)")
	noConsole := fs.Bool("no-console", false, "serve no web console")
	cf := addConsoleFlags(fs)
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return err
	}
	if *withParent {
		if err := exitWithParent(); err != nil {
			return err
		}
	}
	dir, err := devstack.OpenDir(*dirPath)
	if errors.Is(err, devstack.ErrDirInUse) {
		return usageError(fmt.Errorf("--dir %s: %w", *dirPath, err))
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	for flagName, port := range map[string]int{"--nats-port": *natsPort, "--mongo-port": *mongoPort} {
		if err := portFree(port); err != nil {
			return usageError(fmt.Errorf("%s %d: %w", flagName, port, err))
		}
	}
	if err := dir.Prepare(*fresh); err != nil {
		return err
	}
	ns, err := devstack.StartNATS(devstack.NATSOptions{Port: *natsPort, StoreDir: dir.NATSDir()})
	if err != nil {
		return err
	}
	defer devstack.StopNATS(ns)
	mongoSrv, err := devstack.StartMongo(net.JoinHostPort("127.0.0.1", strconv.Itoa(*mongoPort)), dir.MongoDir())
	if err != nil {
		return err
	}
	defer mongoSrv.Stop()
	fmt.Fprintln(out, describeDir(ctx, dir, *fresh, ns, mongoSrv, cfg.MongoDatabase))
	cfg.NATSURL, cfg.MongoURI, cfg.Manifest = ns.ClientURL(), mongoSrv.URI, *path
	fmt.Fprintf(out, "NATS_URL=%s\nMONGO_URI=%s\n", cfg.NATSURL, cfg.MongoURI)
	log := cfg.newLogger(errOut)
	if !*noConsole {
		spec, err := deadLetterSpec(*path)
		if err != nil {
			return err
		}
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "console-port" })
		c, err := startDevConsole(ctx, cfg.NATSURL, *consolePort, explicit, spec, cf, cfg.ConsoleToken, out, log)
		if err != nil {
			return err
		}
		defer c.stop()
	}
	return serve(ctx, cfg, log, func() { fmt.Fprintln(out, "ready") })
}

// describeDir is the line that says whether the stack starts fresh or on
// the data a previous one left, and what that data is.
func describeDir(ctx context.Context, dir *devstack.Dir, fresh bool, ns *server.Server, m *devstack.Mongo, database string) string {
	switch {
	case fresh:
		return fmt.Sprintf("starting fresh: --fresh wiped %s/", dir.Path)
	case !dir.Reused:
		return fmt.Sprintf("starting fresh in %s/ (nothing there yet)", dir.Path)
	}
	since := ""
	if !dir.Created.IsZero() {
		since = " (created " + dir.Created.Format(time.DateTime) + ")"
	}
	contents, err := devstack.Count(ctx, ns, m, database)
	if err != nil {
		return fmt.Sprintf("reusing %s/%s; counting what it holds: %v", dir.Path, since, err)
	}
	return fmt.Sprintf("reusing %s/%s: %s; --fresh starts over", dir.Path, since, contents)
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
