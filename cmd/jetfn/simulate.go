package main

import (
	"context"
	"errors"
	"io"
)

func cmdSimulate(ctx context.Context, args []string, out, errOut io.Writer) error {
	return usageError(errors.New("simulate: not wired yet"))
}
