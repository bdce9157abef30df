package manifest

// A delayed output (OutputSpec.Delayed) waits in its output stream as two
// messages the runtime publishes in one atomic batch: the server's
// one-shot message schedule, on <subject>.jetfn-delay.<id>, which the
// server turns into the output on <subject> at its time and then deletes,
// and a receipt, on <subject>.jetfn-delay.<id>.sent, which carries the
// output's message ID and stays. The receipt is what makes a retried
// handler's second PublishAt a duplicate even after the output was
// published and the server restarted: the server remembers a message ID
// after a restart only from the messages it still stores.

// DelaySubjectInfix follows an output's subject in the subjects of its
// waiting schedule and receipt.
const DelaySubjectInfix = ".jetfn-delay."

// DelaySubjects is the pattern of the subjects a delayed output on subject
// waits under.
func DelaySubjects(subject string) string { return subject + DelaySubjectInfix + ">" }
