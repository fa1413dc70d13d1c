package analytics

import (
	"log"
	"os"
)

// Logger is where a client logs what happens in the background: Logf for
// regular messages (only with Config.Verbose, or DEBUG=analytics in the
// environment), Errorf for messages that will not be delivered.
type Logger interface {
	// Logf logs a regular message.
	Logf(format string, args ...interface{})
	// Errorf logs an error.
	Errorf(format string, args ...interface{})
}

// StdLogger is a Logger writing to logger, with INFO: and ERROR: prefixes.
func StdLogger(logger *log.Logger) Logger {
	return stdLogger{logger: logger}
}

type stdLogger struct {
	logger *log.Logger
}

func (l stdLogger) Logf(format string, args ...interface{}) {
	l.logger.Printf("INFO: "+format, args...)
}

func (l stdLogger) Errorf(format string, args ...interface{}) {
	l.logger.Printf("ERROR: "+format, args...)
}

func newDefaultLogger() Logger {
	return StdLogger(log.New(os.Stderr, "segment ", log.LstdFlags))
}
