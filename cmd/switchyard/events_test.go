package main

import "testing"

// TestEventsSubsChecksUser: events subs refuses a USER that cannot name a
// user's rows (persist.ValidStreamName) as a usage error naming the user,
// before it connects, as events presence does. Before, subs did not check
// it, so an empty USER failed as "cannot reach NATS" or as not found.
func TestEventsSubsChecksUser(t *testing.T) {
	t.Parallel()
	for _, user := range []string{"", " alice"} {
		for _, sub := range []string{"subs", "presence"} {
			args := []string{"events", sub, user, "--nats", deadNATS(t)}
			_, stderr, code := execute(t, args...)
			wantUsage(t, args, stderr, code, "user")
		}
	}
}
