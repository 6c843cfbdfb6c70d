package events

// Reason says why a gap marker stands where events were. The set is
// closed: a subscriber can switch on it, and /metrics counts each.
type Reason string

// The gap reasons. The first four are the seed system's; the others name
// losses of ours.
const (
	// ReasonMatchedSubscriptionLimit: an event matched more subscriptions
	// of one owner than MaxMatchedPerOwner.
	ReasonMatchedSubscriptionLimit Reason = "matched_subscription_limit"
	// ReasonFilterEvaluationLimit: finding an event's subscriptions of one
	// owner needed more than MaxFilterEvaluations filter evaluations.
	ReasonFilterEvaluationLimit Reason = "filter_evaluation_limit"
	// ReasonDeliveryRateLimit: a subscription had its deliveries of the
	// sliding minute.
	ReasonDeliveryRateLimit Reason = "delivery_rate_limit"
	// ReasonBacklogOverflow: a `single` subscription's backlog (or a
	// forward queue to a peer) was full, and its oldest entries were shed.
	ReasonBacklogOverflow Reason = "backlog_overflow"
	// ReasonFeedLoss: a change feed lost messages that the stream could no
	// longer supply (they were deleted or expired before the router read
	// them back).
	ReasonFeedLoss Reason = "feed_loss"
	// ReasonSendFailed: a batch to a peer region was lost (its send
	// failed); its deliveries are gone.
	ReasonSendFailed Reason = "send_failed"
	// ReasonQueueOverflow: a subscriber's socket did not read fast enough
	// and its outgoing queue was full; the deliveries that did not fit
	// are counted under one marker per subscription, sent once there is
	// room.
	ReasonQueueOverflow Reason = "queue_overflow"
	// ReasonRegionRestart: a `single` subscription's region restarted,
	// and some changes of its stream between the last one it settled and
	// the restart could not be read back (deleted or expired since, or
	// replaced by a newer value, which is delivered): they are not known.
	ReasonRegionRestart Reason = "region_restart"
)

// Reasons lists every Reason, for metrics and documentation.
var Reasons = []Reason{
	ReasonMatchedSubscriptionLimit, ReasonFilterEvaluationLimit, ReasonDeliveryRateLimit,
	ReasonBacklogOverflow, ReasonFeedLoss, ReasonSendFailed, ReasonQueueOverflow,
	ReasonRegionRestart,
}

// Gap is a marker standing where events were lost.
type Gap struct {
	Reason Reason
	// Subject is the subject the lost events were on, when one subject
	// covers them (a fan-out limit, a rate limit); zero otherwise.
	Subject Subject
	// Sub is the subscription that lost them.
	Sub SubID
	// Count is how many events it stands for (at least 1).
	Count int
	// From and To bound the lost events' times, unix milliseconds.
	From, To int64
}
