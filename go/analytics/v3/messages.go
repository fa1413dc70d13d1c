package analytics

import (
	"errors"
	"time"

	"example.invalid/callpost/go/callpost"
	"example.invalid/callpost/go/internal/calljson"
)

// Message is a call a client can enqueue: Track, Identify, Page, Screen,
// Group or Alias (or a pointer to one).
type Message interface {
	// Validate checks the message against the spec's rules, in the core:
	// nil, a FieldError for a missing required field (wrapping the core's
	// *callpost.Error), or the core's *callpost.Error for anything else.
	Validate() error
}

// Callback is told what became of each enqueued message: Success once the
// server accepted its batch, Failure when it will not be delivered
// (refused, retries exhausted, or still queued when the client closed;
// err is a *callpost.Error of class callpost.ErrDelivery). Every message
// Enqueue accepted gets exactly one of the two. They are called on the
// client's goroutine, so they should return quickly, and must not call the
// client's Close (which waits for that goroutine).
type Callback interface {
	// Success is called for a message the server accepted.
	Success(Message)
	// Failure is called for a message that will not be delivered.
	Failure(Message, error)
}

var (
	_ Message = Track{}
	_ Message = Identify{}
	_ Message = Page{}
	_ Message = Screen{}
	_ Message = Group{}
	_ Message = Alias{}
)

// Track records an event the user performed.
type Track struct {
	// Type is set by the client ("track"); any value given is replaced.
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	AnonymousId  string       `json:"anonymousId,omitempty"`
	UserId       string       `json:"userId,omitempty"`
	Event        string       `json:"event"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Properties   Properties   `json:"properties,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Identify records who the user is, with traits.
type Identify struct {
	// Type is set by the client ("identify").
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	AnonymousId  string       `json:"anonymousId,omitempty"`
	UserId       string       `json:"userId,omitempty"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Traits       Traits       `json:"traits,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Page records a web page view.
type Page struct {
	// Type is set by the client ("page").
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	AnonymousId  string       `json:"anonymousId,omitempty"`
	UserId       string       `json:"userId,omitempty"`
	Name         string       `json:"name,omitempty"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Properties   Properties   `json:"properties,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Screen records a mobile screen view.
type Screen struct {
	// Type is set by the client ("screen").
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	AnonymousId  string       `json:"anonymousId,omitempty"`
	UserId       string       `json:"userId,omitempty"`
	Name         string       `json:"name,omitempty"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Properties   Properties   `json:"properties,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Group associates the user with a group.
type Group struct {
	// Type is set by the client ("group").
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	AnonymousId  string       `json:"anonymousId,omitempty"`
	UserId       string       `json:"userId,omitempty"`
	GroupId      string       `json:"groupId"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Traits       Traits       `json:"traits,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Alias merges two identities: PreviousId into UserId.
type Alias struct {
	// Type is set by the client ("alias").
	Type string `json:"type,omitempty"`

	MessageId    string       `json:"messageId,omitempty"`
	PreviousId   string       `json:"previousId"`
	UserId       string       `json:"userId"`
	Timestamp    time.Time    `json:"timestamp,omitempty"`
	Context      *Context     `json:"context,omitempty"`
	Integrations Integrations `json:"integrations,omitempty"`
}

// Validate checks the track call in the core.
func (msg Track) Validate() error { return validate(msg) }

// Validate checks the identify call in the core.
func (msg Identify) Validate() error { return validate(msg) }

// Validate checks the page call in the core.
func (msg Page) Validate() error { return validate(msg) }

// Validate checks the screen call in the core.
func (msg Screen) Validate() error { return validate(msg) }

// Validate checks the group call in the core.
func (msg Group) Validate() error { return validate(msg) }

// Validate checks the alias call in the core.
func (msg Alias) Validate() error { return validate(msg) }

func validate(msg Message) error {
	w, err := encode(msg, nil)
	if err != nil {
		return err
	}
	defer w.Release()
	call, err := w.Bytes()
	if err == nil {
		err = callpost.ValidateCall(call)
	}
	return fieldError(msg, err)
}

// deref takes the message out of a pointer, as analytics-go accepts both.
func deref(msg Message) (Message, bool) {
	switch m := msg.(type) {
	case *Track:
		return derefOf(m)
	case *Identify:
		return derefOf(m)
	case *Page:
		return derefOf(m)
	case *Screen:
		return derefOf(m)
	case *Group:
		return derefOf(m)
	case *Alias:
		return derefOf(m)
	case Track, Identify, Page, Screen, Group, Alias:
		return m, true
	}
	return msg, false
}

func derefOf[T Message](p *T) (Message, bool) {
	if p == nil {
		return nil, false
	}
	return *p, true
}

// encode writes the message as the call the core reads.
func encode(msg Message, defaults *Context) (*calljson.Writer, error) {
	var w *calljson.Writer
	common := func(kind, messageID, anonymousID, userID string) {
		w = calljson.Start(kind)
		w.String("messageId", messageID)
		w.String("anonymousId", anonymousID)
		w.String("userId", userID)
	}
	switch m := msg.(type) {
	case Track:
		common("track", m.MessageId, m.AnonymousId, m.UserId)
		w.String("event", m.Event)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("properties", m.Properties)
		w.Value("integrations", m.Integrations)
	case Identify:
		common("identify", m.MessageId, m.AnonymousId, m.UserId)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("traits", m.Traits)
		w.Value("integrations", m.Integrations)
	case Page:
		common("page", m.MessageId, m.AnonymousId, m.UserId)
		w.String("name", m.Name)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("properties", m.Properties)
		w.Value("integrations", m.Integrations)
	case Screen:
		common("screen", m.MessageId, m.AnonymousId, m.UserId)
		w.String("name", m.Name)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("properties", m.Properties)
		w.Value("integrations", m.Integrations)
	case Group:
		common("group", m.MessageId, m.AnonymousId, m.UserId)
		w.String("groupId", m.GroupId)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("traits", m.Traits)
		w.Value("integrations", m.Integrations)
	case Alias:
		common("alias", m.MessageId, "", m.UserId)
		w.String("previousId", m.PreviousId)
		w.Time("timestamp", m.Timestamp)
		w.Value("context", contextValue(defaults, m.Context))
		w.Value("integrations", m.Integrations)
	default:
		return nil, &callpost.Error{Code: callpost.CodeInvalidArgument,
			Message: "only analytics.Track, Identify, Page, Screen, Group and Alias can be enqueued"}
	}
	return w, nil
}

// fieldError presents the core's "missing field" refusals as analytics-go
// did (a FieldError naming the struct field), wrapping the core's error.
func fieldError(msg Message, err error) error {
	var e *callpost.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	var typ, userID string
	switch m := msg.(type) {
	case Track:
		typ, userID = "Track", m.UserId
	case Identify:
		typ, userID = "Identify", m.UserId
	case Page:
		typ, userID = "Page", m.UserId
	case Screen:
		typ, userID = "Screen", m.UserId
	case Group:
		typ, userID = "Group", m.UserId
	case Alias:
		typ, userID = "Alias", m.UserId
	}
	f := FieldError{Type: "analytics." + typ, err: err}
	switch e.Code {
	case callpost.CodeMissingIdentity, callpost.CodeMissingUserID:
		f.Name, f.Value = "UserId", userID
	case callpost.CodeMissingEvent:
		f.Name, f.Value = "Event", ""
	case callpost.CodeMissingGroupID:
		f.Name, f.Value = "GroupId", ""
	case callpost.CodeMissingPreviousID:
		f.Name, f.Value = "PreviousId", ""
	default:
		return err
	}
	return f
}

// stamped is the message as the callback sees it: its type, messageId and
// timestamp filled in, as analytics-go's callbacks saw them.
func stamped(msg Message, id string, now time.Time) Message {
	now = now.Truncate(time.Millisecond)
	stamp := func(t *time.Time) {
		if t.IsZero() {
			*t = now
		}
	}
	switch m := msg.(type) {
	case Track:
		m.Type, m.MessageId = "track", id
		stamp(&m.Timestamp)
		return m
	case Identify:
		m.Type, m.MessageId = "identify", id
		stamp(&m.Timestamp)
		return m
	case Page:
		m.Type, m.MessageId = "page", id
		stamp(&m.Timestamp)
		return m
	case Screen:
		m.Type, m.MessageId = "screen", id
		stamp(&m.Timestamp)
		return m
	case Group:
		m.Type, m.MessageId = "group", id
		stamp(&m.Timestamp)
		return m
	case Alias:
		m.Type, m.MessageId = "alias", id
		stamp(&m.Timestamp)
		return m
	}
	return msg
}
