package msgkey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetfn/jetfn/internal/msgkey"
)

func TestOf(t *testing.T) {
	tests := []struct {
		name    string
		src     msgkey.Source
		subject string
		header  map[string][]string
		data    string
		want    string
		wantErr string // a part of the reason, when there is no key
	}{
		{name: "subject token", src: msgkey.Source{Token: 2}, subject: "orders.o-17.created", want: "o-17"},
		{name: "subject too short", src: msgkey.Source{Token: 4}, subject: "orders.o-17.created",
			wantErr: "subject orders.o-17.created has 3 tokens, the key is token 4"},
		{name: "header", src: msgkey.Source{Header: "Order-Id"}, header: map[string][]string{"Order-Id": {"o-1", "o-2"}}, want: "o-1"},
		{name: "header in another case", src: msgkey.Source{Header: "Order-Id"}, header: map[string][]string{"order-id": {"o-3"}}, want: "o-3"},
		{name: "header absent", src: msgkey.Source{Header: "Order-Id"}, header: map[string][]string{"Other": {"x"}},
			wantErr: "header Order-Id is absent or empty"},
		{name: "header empty", src: msgkey.Source{Header: "Order-Id"}, header: map[string][]string{"Order-Id": {""}},
			wantErr: "header Order-Id is absent or empty"},
		{name: "string field", src: msgkey.Source{Field: "recordingId"}, data: `{"a":{"recordingId":"inner"},"recordingId":"r-9","z":[1,2]}`, want: "r-9"},
		{name: "number field keeps its text", src: msgkey.Source{Field: "n"}, data: `{"n": 42.0}`, want: "42.0"},
		{name: "field absent", src: msgkey.Source{Field: "recordingId"}, data: `{"other":"x"}`,
			wantErr: "field recordingId is absent from the payload"},
		{name: "field null", src: msgkey.Source{Field: "id"}, data: `{"id":null}`, wantErr: "field id is null, want a string or a number"},
		{name: "field object", src: msgkey.Source{Field: "id"}, data: `{"id":{"x":1}}`, wantErr: "field id is an object"},
		{name: "field empty string", src: msgkey.Source{Field: "id"}, data: `{"id":""}`, wantErr: "field id is an empty string"},
		{name: "payload an array", src: msgkey.Source{Field: "id"}, data: `[1]`, wantErr: "the payload is not a JSON object"},
		{name: "payload not JSON", src: msgkey.Source{Field: "id"}, data: `{"id" "x"}`, wantErr: "the payload is not valid JSON"},
		{name: "no source", src: msgkey.Source{}, wantErr: "declares no key source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.src.Of(tt.subject, tt.header, []byte(tt.data))
			if tt.wantErr != "" {
				if !errors.Is(err, msgkey.ErrNoKey) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Of = %q, %v; want ErrNoKey saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Of = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
