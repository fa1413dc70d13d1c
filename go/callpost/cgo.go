package callpost

// The library is callpost-capi's static library, libcallpost_capi.a. By
// default it is taken from the checkout this package sits in
// (target/release, built by `cargo build --release -p callpost-capi`);
// CGO_LDFLAGS=-L<dir> puts another directory first (the tests use
// target/debug), and CGO_CFLAGS=-I<dir> another header directory. It is
// named as an archive (-l:) so that the shared library beside it is not
// picked instead. A Rust staticlib links with libdl, libpthread and libm on
// Linux (glibc).

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi/include
#cgo LDFLAGS: -L${SRCDIR}/../../target/release -l:libcallpost_capi.a -ldl -lpthread -lm
#include <stdlib.h>
#include "callpost.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

// view lends b to C for the duration of one call. The bytes hold no Go
// pointers, which is what cgo allows to pass.
func view(b []byte) C.CallpostStr {
	if len(b) == 0 {
		return C.CallpostStr{}
	}
	return C.CallpostStr{ptr: (*C.uint8_t)(unsafe.Pointer(&b[0])), len: C.size_t(len(b))}
}

// viewString lends s to C for one call without copying it: a string's data
// pointer is the first word of its header (Go 1.19 has no
// unsafe.StringData). C only reads it.
func viewString(s string) C.CallpostStr {
	if len(s) == 0 {
		return C.CallpostStr{}
	}
	data := *(*unsafe.Pointer)(unsafe.Pointer(&s))
	return C.CallpostStr{ptr: (*C.uint8_t)(data), len: C.size_t(len(s))}
}

// goString copies a string C lent (static, or owned by a struct about to be
// freed).
func goString(s C.CallpostStr) string {
	if s.len == 0 || s.ptr == nil {
		return ""
	}
	return C.GoStringN((*C.char)(unsafe.Pointer(s.ptr)), C.int(s.len))
}

// takeBytes copies bytes callpost allocated and frees them.
func takeBytes(b *C.CallpostBytes) []byte {
	if b.len == 0 || b.ptr == nil {
		return nil
	}
	out := C.GoBytes(unsafe.Pointer(b.ptr), C.int(b.len))
	C.callpost_bytes_free(b)
	return out
}

// bytesOf reads bytes callpost owns, without freeing them.
func bytesOf(b C.CallpostBytes) []byte {
	if b.len == 0 || b.ptr == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(b.ptr), C.int(b.len))
}

// cList is a list of strings copied into C memory, for settings that hold a
// pointer per string (cgo forbids passing Go memory that holds Go
// pointers). Free it after the call.
type cList struct {
	items *C.CallpostStr
	count int
	bufs  []unsafe.Pointer
}

func newCList(values []string) *cList {
	l := &cList{count: len(values)}
	if len(values) == 0 {
		return l
	}
	size := C.size_t(len(values)) * C.size_t(unsafe.Sizeof(C.CallpostStr{}))
	l.items = (*C.CallpostStr)(C.malloc(size))
	items := unsafe.Slice(l.items, len(values))
	for i, v := range values {
		items[i] = l.copy(v)
	}
	return l
}

// copy puts v in C memory that the list frees.
func (l *cList) copy(v string) C.CallpostStr {
	if len(v) == 0 {
		return C.CallpostStr{}
	}
	p := C.CBytes([]byte(v))
	l.bufs = append(l.bufs, p)
	return C.CallpostStr{ptr: (*C.uint8_t)(p), len: C.size_t(len(v))}
}

func (l *cList) free() {
	for _, p := range l.bufs {
		C.free(p)
	}
	if l.items != nil {
		C.free(unsafe.Pointer(l.items))
	}
	*l = cList{}
}

// failure turns a filled CallpostError into a Go error and frees it.
func failure(status C.CallpostStatus, e *C.CallpostError) error {
	if status == C.CALLPOST_OK {
		return nil
	}
	message := string(bytesOf(e.message))
	code := Code(goString(e.code))
	C.callpost_error_free(e)
	if status == C.CALLPOST_INTERNAL || code == "" {
		return &internalError{message: message}
	}
	return &Error{Code: code, Message: message}
}

// headerLines writes name/value pairs as the header block the C ABI reads.
// A line break inside a name or value (net/http never lets one through)
// becomes a space, so that one header cannot pose as another.
func headerLines(b []byte, name, value string) []byte {
	b = appendHeaderText(b, name)
	b = append(b, ':', ' ')
	b = appendHeaderText(b, value)
	return append(b, '\r', '\n')
}

func appendHeaderText(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\r\n") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' {
			b = append(b, ' ')
		} else {
			b = append(b, c)
		}
	}
	return b
}

// parseHeaderBlock reads the header block the C ABI writes.
func parseHeaderBlock(block []byte) []Header {
	text := string(block)
	out := make([]Header, 0, strings.Count(text, "\r\n"))
	for _, line := range strings.Split(text, "\r\n") {
		if line == "" {
			continue
		}
		name, value, _ := strings.Cut(line, ": ")
		out = append(out, Header{Name: name, Value: value})
	}
	return out
}

// crossing is one cgo call into the library that does nothing: what a
// crossing costs, for the benchmarks.
func crossing() int {
	return int(C.callpost_version().len)
}
