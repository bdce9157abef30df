package main

import (
	"context"
	"errors"
	"io"
)

func simulateRecording(ctx context.Context, cfg Config, args []string, out, errOut io.Writer) error {
	return usageError(errors.New("simulate recording: not wired yet"))
}
