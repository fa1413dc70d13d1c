package e2e

// Every Go block of the docs runs here, so the Go docs cannot go stale (as
// python/tests/test_docs.py and wasm/test/docs.test.mjs do for theirs):
//
//   - a ```go block is a whole program: it is built against this module,
//     as a user's module would take it (a replace directive), and run with
//     WRITE_KEY, RELAY_URL (a local Tracking API that checks the write key)
//     and WEBHOOK_SECRET in its environment; it must exit 0, and the API
//     must have refused nothing;
//   - a ```sh block with go commands is the new user's setup: its go
//     commands run in a new module (go mod init, the program of the ```go
//     block after it as main.go) beside a link to this checkout, and the
//     program they build must run. Its cargo command must be the C ABI's
//     release build; the tests link the debug build scripts/test-go.sh
//     made instead.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"example.invalid/callpost/go/internal/testapi"
)

const (
	docsWriteKey = "docs-write-key"
	docsSecret   = "docs-webhook-secret"
)

type block struct {
	where string
	lang  string
	code  string
}

func docBlocks(t *testing.T) []block {
	root := filepath.Join("..", "..")
	paths, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	paths = append(paths, filepath.Join(root, "README.md"))
	var out []block
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var open *block
		var lines []string
		for n, line := range strings.Split(string(text), "\n") {
			if !strings.HasPrefix(line, "```") {
				if open != nil {
					lines = append(lines, line)
				}
				continue
			}
			if open == nil {
				rel, _ := filepath.Rel(root, path)
				open = &block{where: fmt.Sprintf("%s:%d", rel, n+1), lang: strings.TrimSpace(line[3:])}
				lines = nil
				continue
			}
			open.code = strings.Join(lines, "\n") + "\n"
			out = append(out, *open)
			open = nil
		}
	}
	return out
}

func goEnv(extra ...string) []string {
	return append(append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"), extra...)
}

func goTool() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// run runs a command with a hang guard.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

func TestGoDocBlocks(t *testing.T) {
	blocks := docBlocks(t)
	api := testapi.New(t, docsWriteKey)
	env := goEnv("WRITE_KEY="+docsWriteKey, "RELAY_URL="+api.URL, "WEBHOOK_SECRET="+docsSecret)

	// Every program in one module, built by one go command.
	module, _ := filepath.Abs("..")
	dir := t.TempDir()
	gomod := "module example.com/docs\n\ngo 1.19\n\nrequire example.invalid/callpost/go v0.0.0-00010101000000-000000000000\n\n" +
		"replace example.invalid/callpost/go => " + module + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o600); err != nil {
		t.Fatal(err)
	}
	var programs []block
	for _, b := range blocks {
		if b.lang == "go" {
			programs = append(programs, b)
		} else if strings.HasPrefix(b.lang, "go") {
			t.Errorf("%s: ```%s: only whole programs (```go) are documented", b.where, b.lang)
		}
	}
	if len(programs) < 4 {
		t.Fatalf("the docs lost their Go examples (%d), or the parser lost the docs", len(programs))
	}
	for i, p := range programs {
		sub := filepath.Join(dir, fmt.Sprintf("p%d", i))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "main.go"), []byte(p.code), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	run(t, dir, env, goTool(), "build", "-o", bin+string(filepath.Separator), "./...")
	for i, p := range programs {
		refusedBefore := len(api.Refused())
		run(t, dir, env, filepath.Join(bin, fmt.Sprintf("p%d", i)))
		if refused := api.Refused()[refusedBefore:]; len(refused) != 0 {
			t.Errorf("%s: the Tracking API refused %v", p.where, refused)
		}
	}
}

func TestTheGoSetupAsANewUserFollowsIt(t *testing.T) {
	blocks := docBlocks(t)
	var setup *block
	var program string
	for i, b := range blocks {
		if b.lang == "sh" && strings.Contains(b.code, "\ngo mod ") {
			setup = &blocks[i]
			for _, next := range blocks[i+1:] {
				if next.lang == "go" {
					program = next.code
					break
				}
			}
			break
		}
	}
	if setup == nil || program == "" {
		t.Fatal("no Go setup in the docs")
	}
	checkout, _ := filepath.Abs(filepath.Join("..", ".."))
	top := t.TempDir()
	// The user's checkout of callpost, and their module beside it, with
	// the program of the docs as its main.go.
	if err := os.Symlink(checkout, filepath.Join(top, "callpost")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(top, "app")
	if err := os.Mkdir(app, 0o700); err != nil {
		t.Fatal(err)
	}
	env := goEnv()
	run(t, app, env, goTool(), "mod", "init", "example.com/app")
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	api := testapi.New(t, docsWriteKey)
	for _, line := range strings.Split(setup.code, "\n") {
		args := strings.Fields(line)
		if len(args) == 0 || strings.HasPrefix(args[0], "#") {
			continue
		}
		switch args[0] {
		case "cargo":
			// The release build is the user's; the tests link the debug one.
			want := []string{"cargo", "build", "--release", "-p", "callpost-capi"}
			if strings.Join(args, " ") != strings.Join(want, " ") {
				t.Fatalf("%s: %q is not the C ABI's build", setup.where, line)
			}
			if _, err := os.Stat(filepath.Join(checkout, "capi", "Cargo.toml")); err != nil {
				t.Fatal(err)
			}
		case "go":
			run(t, app, env, goTool(), args[1:]...)
		default:
			t.Fatalf("%s: %q: a command this test does not follow", setup.where, line)
		}
	}
	cwd := app
	built := filepath.Join(cwd, filepath.Base(cwd))
	run(t, cwd, goEnv("WRITE_KEY="+docsWriteKey, "RELAY_URL="+api.URL), built)
	api.WaitMessages(t, 2)
	if refused := api.Refused(); len(refused) != 0 {
		t.Fatalf("refused: %v", refused)
	}
}
