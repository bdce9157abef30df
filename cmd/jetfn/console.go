package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/console"
	"github.com/jetfn/jetfn/manifest"
)

// defaultConsolePort is where `jetfn dev` and `jetfn console` serve the
// console unless told otherwise.
const defaultConsolePort = 7333

// consoleFlags are the console's settings that both commands take.
type consoleFlags struct {
	deployment *string
	traceURL   *string
	interval   *time.Duration
}

func addConsoleFlags(fs interface {
	String(name, value, usage string) *string
	Duration(name string, value time.Duration, usage string) *time.Duration
}) consoleFlags {
	return consoleFlags{
		deployment: fs.String("deployment", "default", "the deployment whose revisions the deploys page shows (the jetfn-manifests KV key)"),
		traceURL:   fs.String("trace-url", "", "link each run's trace ID to a trace viewer, e.g. 'https://jaeger.example/trace/{trace_id}'"),
		interval:   fs.Duration("console-interval", console.DefaultInterval, "how often the console polls the stack and live pages refresh"),
	}
}

// cmdConsole serves the web console against NATS_URL: read-only unless a
// token is given (JETFN_CONSOLE_TOKEN, or --token).
func cmdConsole(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("console", "console [--listen 127.0.0.1:7333] [--deployment default] [--trace-url URL] [--manifest FILE]", errOut)
	listen := fs.String("listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(defaultConsolePort)), "address to serve on; a non-loopback address exposes the console to the network")
	token := fs.String("token", "", "allow actions to whoever signs in with this token (at least 16 characters; prefer $JETFN_CONSOLE_TOKEN, as a flag shows in ps)")
	path := deadLetterManifestFlag(fs)
	cf := addConsoleFlags(fs)
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return err
	}
	if *token == "" {
		*token = cfg.ConsoleToken
	}
	spec, err := deadLetterSpec(*path)
	if err != nil {
		return err
	}
	nc, err := connectOps(errOut)
	if err != nil {
		return err
	}
	defer nc.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usageError(fmt.Errorf("--listen %s: %w", *listen, err))
	}
	srv, err := newConsole(nc, spec, cf, *token, ln, cfg.newLogger(errOut))
	if err != nil {
		_ = ln.Close()
		return err
	}
	fmt.Fprintf(out, "CONSOLE=%s\n", consoleURL(ln))
	return srv.Run(ctx, ln)
}

// newConsole builds the console; bound to a loopback address it refuses
// other Host headers (DNS rebinding).
func newConsole(nc *nats.Conn, spec manifest.DeadLetterSpec, cf consoleFlags, token string, ln net.Listener, log *slog.Logger) (*console.Server, error) {
	opts := []console.Option{console.WithInterval(*cf.interval)}
	if token != "" {
		opts = append(opts, console.WithToken(token))
	}
	if *cf.traceURL != "" {
		opts = append(opts, console.WithTraceURL(*cf.traceURL))
	}
	if addr, ok := ln.Addr().(*net.TCPAddr); ok && addr.IP.IsLoopback() {
		opts = append(opts, console.LoopbackOnly())
	}
	srv, err := console.New(console.Config{NATS: nc, DeadLetter: spec, Deployment: *cf.deployment, Log: log.With("component", "console")}, opts...)
	if err != nil {
		return nil, usageError(err)
	}
	if srv.ReadOnly() {
		log.Info("console is read-only: no token (JETFN_CONSOLE_TOKEN or --token)", "addr", ln.Addr().String())
	}
	return srv, nil
}

func consoleURL(ln net.Listener) string { return "http://" + ln.Addr().String() + "/" }

// devConsole is the console `jetfn dev` serves beside the stack.
type devConsole struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	nc     *nats.Conn
}

// startDevConsole listens on port (or, when the default port is taken, on
// any free one), connects to the embedded NATS and serves until stop. It
// prints CONSOLE= and, as the dev stack is for one person on this
// machine, CONSOLE_TOKEN= (JETFN_CONSOLE_TOKEN, or a new random one).
func startDevConsole(ctx context.Context, natsURL string, port int, explicitPort bool, spec manifest.DeadLetterSpec, cf consoleFlags,
	token string, out io.Writer, log *slog.Logger) (*devConsole, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil && !explicitPort {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, usageError(fmt.Errorf("--console-port %d: %w", port, err))
	}
	nc, err := nats.Connect(natsURL, nats.Name("jetfn-console"), nats.MaxReconnects(-1))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("connecting the console: %w", err)
	}
	if token == "" {
		token = randomToken()
	}
	srv, err := newConsole(nc, spec, cf, token, ln, log)
	if err != nil {
		nc.Close()
		_ = ln.Close()
		return nil, err
	}
	fmt.Fprintf(out, "CONSOLE=%s\nCONSOLE_TOKEN=%s\n", consoleURL(ln), token)
	ctx, cancel := context.WithCancel(ctx)
	d := &devConsole{cancel: cancel, nc: nc}
	d.done.Go(func() {
		if err := srv.Run(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("console stopped", "err", err)
		}
	})
	return d, nil
}

// stop ends the console and waits for it.
func (d *devConsole) stop() {
	if d == nil {
		return
	}
	d.cancel()
	d.done.Wait()
	d.nc.Close()
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
