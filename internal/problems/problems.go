// Package problems splits the errors.Join lists that checks return, so a
// caller can prefix or locate each problem on its own line.
package problems

import (
	"errors"
	"reflect"
)

// joinErrorType is the type errors.Join returns; any other wrapping is left
// alone.
var joinErrorType = reflect.TypeOf(errors.Join(errors.New("")))

// Split is err's parts when errors.Join made it (recursively), else err
// alone; nil has no parts.
func Split(err error) []error {
	if err == nil {
		return nil
	}
	if reflect.TypeOf(err) != joinErrorType {
		return []error{err}
	}
	var parts []error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		parts = append(parts, Split(e)...)
	}
	return parts
}
