package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/runtime"
)

// flushTimeout bounds the export of the last spans at exit, so a collector
// that is down cannot hold a shutdown for the exporter's 10 s per try.
const flushTimeout = 5 * time.Second

// startTracing builds the tracer provider from the OTEL_* environment (nil
// when no endpoint is set) and, when tracing is on, a logger whose lines
// logged with a traced context carry trace_id and span_id. stop flushes
// the spans still batched; call it after the runtime drained.
func startTracing(ctx context.Context, log *slog.Logger) (tp *tracing.Provider, traced *slog.Logger, stop func(), err error) {
	tp, err = tracing.FromEnv(ctx, moduleVersion())
	if err != nil {
		return nil, nil, nil, usageError(err)
	}
	if tp == nil {
		return nil, log, func() {}, nil
	}
	// The SDK reports failed exports here; by default it would print them
	// with the standard logger, outside LOG_FORMAT.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("exporting traces", "err", err) }))
	stop = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}
	log.Info("tracing on", "protocol", tracing.Protocol())
	return tp, tracing.WithTraceIDs(log), stop, nil
}

// tracingOptions turns the runtime's spans on when tracing is.
func tracingOptions(tp *tracing.Provider) []runtime.Option {
	if tp == nil {
		return nil
	}
	return []runtime.Option{runtime.WithTracerProvider(tp.TracerProvider())}
}

// moduleVersion is service.version: the module version the go command
// stamped, "(devel)" for a build in a clone.
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return "(devel)"
}
