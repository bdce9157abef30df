// Package events holds the wire contracts shared by publishers and
// functions: subjects, payload types, message-ID keys and the JSON Schema
// files in schemas/. Both sides import it, so they cannot drift.
package events
