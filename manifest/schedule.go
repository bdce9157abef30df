package manifest

// A scheduled function (schedule:) is triggered by the clock instead of,
// or beside, its publishers: jetfn keeps one schedule message on the
// function's schedule subject, and nats-server (2.12 @every, 2.14 cron
// and time zones) stores a tick on the function's subject at each time,
// in the function's stream. The ticks are ordinary messages of a durable
// consumer, so each runs once across every instance, through restarts and
// SIGKILLs, and nothing in a process keeps time.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ScheduleSpec is a function's schedule: Cron or Every, not both.
type ScheduleSpec struct {
	// Cron is a cron pattern: five fields (minute hour day-of-month month
	// day-of-week) or six (seconds first), or @hourly, @daily, @weekly,
	// @monthly, @yearly.
	Cron string `yaml:"cron"`
	// Every is an interval of at least a second.
	Every time.Duration `yaml:"every"`
	// TimeZone is the IANA zone a Cron pattern's times are in (default
	// UTC).
	TimeZone string `yaml:"timeZone"`
	// Missed says what happens to ticks that waited while no instance ran:
	// MissedOnce (default) runs the newest once, late; MissedSkip runs no
	// tick whose next tick is already due.
	Missed string `yaml:"missed"`
}

// Values of ScheduleSpec.Missed.
const (
	MissedOnce = "once"
	MissedSkip = "skip"
)

// ScheduleSubjectSuffix ends the subject of a function's schedule message:
// its subject, then this.
const ScheduleSubjectSuffix = ".jetfn-schedule"

// ScheduleSubject is where f's schedule message is kept.
func (f *FunctionSpec) ScheduleSubject() string { return f.Subject + ScheduleSubjectSuffix }

// HasScheduleSubject says whether f could keep a schedule: a function
// with one literal subject (validateSchedule).
func (f *FunctionSpec) HasScheduleSubject() bool {
	return f.Subject != "" && len(f.Subjects) == 0 && !strings.ContainsAny(f.Subject, "*>")
}

// ScheduleOwner says whether f keeps the schedule of its subject: it has
// a schedule, or, without one, no other function of the manifest
// schedules the same subject of the same stream (then f purges a schedule
// a deploy removed from it).
func (m *Manifest) ScheduleOwner(f FunctionSpec) bool {
	return f.Schedule != nil || !m.Schedules(f.Stream, f.Subject)
}

// Schedules says whether a function of the manifest schedules subject of
// stream: a removed function's schedule there is no longer its own, but
// the function's that replaced it.
func (m *Manifest) Schedules(stream, subject string) bool {
	for _, g := range m.Functions {
		if g.Schedule != nil && g.Stream == stream && g.Subject == subject {
			return true
		}
	}
	return false
}

// Pattern is the schedule as the server's Nats-Schedule header takes it.
func (s *ScheduleSpec) Pattern() string {
	if s.Every > 0 {
		return "@every " + s.Every.String()
	}
	if fields := strings.Fields(s.Cron); len(fields) == 5 {
		return "0 " + strings.Join(fields, " ") // the server's patterns count seconds first
	}
	return strings.TrimSpace(s.Cron)
}

// validateSchedule checks a scheduled function's schedule and subject.
func (m *Manifest) validateSchedule(fat place, f *FunctionSpec, add problemFunc) {
	s := f.Schedule
	if s == nil {
		return
	}
	at := fat.Key("schedule")
	switch {
	case (s.Cron == "") == (s.Every == 0):
		add(at, "give cron (such as \"*/5 * * * *\") or every (such as 30s), one of them")
	case s.Every != 0 && (s.Every < time.Second || s.Every%time.Second != 0):
		add(at, "every: %s must be whole seconds, at least 1s", s.Every)
	case s.Every != 0 && s.TimeZone != "":
		add(at, "timeZone applies to cron only: every counts from the schedule's start")
	case s.Cron != "":
		if err := checkCron(s.Cron); err != nil {
			add(at, "cron %q: %v", s.Cron, err)
		}
	}
	if s.TimeZone != "" {
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			add(at, "timeZone %q is not an IANA time zone such as Europe/Paris", s.TimeZone)
		}
	}
	if s.Missed != "" && s.Missed != MissedOnce && s.Missed != MissedSkip {
		add(at, "missed: %q: want once (run the newest tick that waited, late) or skip (run no tick whose next one is due)", s.Missed)
	}
	switch {
	case !f.HasScheduleSubject():
		add(fat.Key("subject"), "a scheduled function takes one literal subject: its ticks are stored there")
	case f.IsKeyed():
		add(at, "a keyed function cannot be scheduled: its ticks have no key")
	case m.scheduledTwice(f):
		add(at, "another function schedules %s on stream %s: one schedule a subject", f.Subject, f.Stream)
	default:
		if stream, ok := m.Stream(f.Stream); ok && !CoveredByAny(f.ScheduleSubject(), stream.Subjects) {
			add(fat.Key("subject"), "stream %s must also store %s, where jetfn keeps the schedule: add it (or %s.>) to its subjects",
				stream.Name, f.ScheduleSubject(), f.Subject)
		}
	}
}

// scheduledTwice says whether a function before f in the manifest
// schedules f's subject too: the second one is refused.
func (m *Manifest) scheduledTwice(f *FunctionSpec) bool {
	for _, g := range m.Functions {
		if g.Name == f.Name {
			return false
		}
		if g.Schedule != nil && g.Stream == f.Stream && g.Subject == f.Subject {
			return true
		}
	}
	return false
}

// cronFields are the bounds of the server's six cron fields, and the
// names it takes for months and days of the week.
var cronFields = []struct {
	name     string
	low, top int
	names    []string
}{{"second", 0, 59, nil}, {"minute", 0, 59, nil}, {"hour", 0, 23, nil}, {"day of month", 1, 31, nil},
	{"month", 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{"day of week", 0, 6, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}}

// checkCron checks a pattern as the server will read it: each field a
// comma-separated list of *, n or n-m (a number or a name), each with an
// optional /step.
func checkCron(pattern string) error {
	switch strings.TrimSpace(pattern) {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return nil
	}
	fields := strings.Fields(pattern)
	if len(fields) == 5 {
		fields = append([]string{"0"}, fields...)
	}
	if len(fields) != 6 {
		return fmt.Errorf("%d fields: want 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)", len(strings.Fields(pattern)))
	}
	sets := make([]cronSet, len(fields))
	for i, field := range fields {
		// The server skips empty list items ("1,,2" is 1 and 2).
		for expr := range strings.FieldsFuncSeq(field, func(r rune) bool { return r == ',' }) {
			if err := sets[i].add(expr, i); err != nil {
				return fmt.Errorf("%s field %q: %v", cronFields[i].name, field, err)
			}
		}
	}
	return checkCronDays(sets[3], sets[4], sets[5])
}

// cronSet is the values one cron field lets through, and whether it was
// * or ?: the server ands a restricted day of month with a day of week
// that is *, and ors the two when both are restricted.
type cronSet struct {
	values [60]bool
	star   bool
}

// add checks one range of field i and adds its values.
func (c *cronSet) add(expr string, i int) error {
	b := cronFields[i]
	span, stepText, stepped := strings.Cut(expr, "/")
	step := 1
	if stepped {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return fmt.Errorf("step %q is not a whole number of at least 1", stepText)
		}
		step = n
	}
	low, top := b.low, b.top
	if span == "*" || span == "?" {
		c.star = c.star || step == 1 // the server: */2 restricts
	} else {
		bounds := strings.Split(span, "-")
		if len(bounds) > 2 {
			return fmt.Errorf("%q has more than one -", span)
		}
		var values []int
		for _, v := range bounds {
			n, err := strconv.Atoi(v)
			if err != nil {
				n = b.low + slices.Index(b.names, strings.ToLower(v))
				if n < b.low {
					return fmt.Errorf("%q is not a number from %d to %d%s", v, b.low, b.top, namesHint(b.names))
				}
			}
			if n < b.low || n > b.top {
				return fmt.Errorf("%d is not from %d to %d", n, b.low, b.top)
			}
			values = append(values, n)
		}
		if len(values) == 2 && values[0] > values[1] {
			return fmt.Errorf("range %s runs backwards", span)
		}
		low, top = values[0], values[len(values)-1]
		if len(values) == 1 && stepped {
			top = b.top // n/step: from n on, as the server reads it
		}
	}
	for v := low; v <= top; v += step {
		c.values[v] = true
	}
	return nil
}

// checkCronDays refuses a pattern whose restricted days of month fall in
// none of its months (30 February), with its day of week unrestricted: the
// server would look five years ahead for a time, find none and refuse it.
func checkCronDays(days, months, weekdays cronSet) error {
	if days.star || !weekdays.star {
		return nil
	}
	var asked []int
	for day := 1; day <= 31; day++ {
		if !days.values[day] {
			continue
		}
		asked = append(asked, day)
		for month := 1; month <= 12; month++ {
			if months.values[month] && day <= daysIn(time.Month(month)) {
				return nil
			}
		}
	}
	return fmt.Errorf("no month given has a day %s: the schedule would never run", joinInts(asked))
}

// daysIn is the most days month ever has (29 for February).
func daysIn(month time.Month) int {
	return time.Date(2024, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func joinInts(values []int) string {
	text := make([]string, len(values))
	for i, v := range values {
		text[i] = strconv.Itoa(v)
	}
	return strings.Join(text, " or ")
}

func namesHint(names []string) string {
	if names == nil {
		return ""
	}
	return " or a name such as " + names[0]
}
