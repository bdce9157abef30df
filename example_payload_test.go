package jetfn_test

import (
	"context"
	"fmt"

	"github.com/jetfn/jetfn"
)

// A payload's rules live in its JSON Schema; the Go type only names and
// types the fields. MustPayload checks that the two agree.
type greeting struct {
	Name  string `json:"name"`
	Times int    `json:"times"`
}

var greetingPayload = jetfn.MustPayload[greeting]([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["name"],
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "times": {"type": "integer", "minimum": 1}
  }
}`))

// ExamplePayload decodes a payload the way a function's handler does, and
// shows the reason a refused one is dead-lettered with: every problem, in
// the payload's own terms.
func ExamplePayload() {
	g, err := greetingPayload.Decode([]byte(`{"name":"Ana","times":2}`))
	fmt.Println(g, err)

	_, err = greetingPayload.Decode([]byte(`{"Name":"Ana","times":"2"}`))
	fmt.Println(err)

	_, err = greetingPayload.Decode([]byte(`hello`))
	fmt.Println(err)
	// Output:
	// {Ana 2} <nil>
	// payload: name: missing (the payload has "Name"; names are case-sensitive); times: want an integer, got a string
	// payload: not JSON at byte 0: unexpected "hello"
}

// ExamplePayload_Handler adapts a typed handler: a payload Decode refuses
// is malformed, so the runtime dead-letters it and never retries it.
func ExamplePayload_Handler() {
	h := greetingPayload.Handler(func(_ context.Context, _ jetfn.Msg, g greeting) error {
		fmt.Println("hello,", g.Name)
		return nil
	})
	fmt.Println(h.Handle(context.Background(), jetfn.Msg{Data: []byte(`{"name":"Ana"}`)}))
	fmt.Println(h.Handle(context.Background(), jetfn.Msg{Data: []byte(`{"name":""}`)}))
	// Output:
	// hello, Ana
	// <nil>
	// malformed message: payload: name: must not be empty
}
