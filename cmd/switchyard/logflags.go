package main

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Log flags: persistent on the root, so every command takes them, and set
// up before any command runs so no log line is written with the wrong
// handler.
const (
	logFormatEnv = "SWITCHYARD_LOG_FORMAT"
	logLevelEnv  = "SWITCHYARD_LOG_LEVEL"
)

// logLevels maps the accepted --log-level words to slog levels.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

func init() {
	// A subcommand's own persistent hook would otherwise replace the
	// root's, and logging would stay unconfigured under it. Set once here,
	// not per built tree: it is cobra's global.
	cobra.EnableTraverseRunHooks = true
}

// logFlags holds the root's log flags.
type logFlags struct {
	format string // --log-format: text or json
	level  string // --log-level: debug, info, warn or error
}

// addLogFlags registers the log flags on root and sets up logging before
// any command of its tree runs.
func addLogFlags(root *cobra.Command) {
	var lf logFlags
	flags := root.PersistentFlags()
	flags.StringVar(&lf.format, "log-format", "text", "log line `FORMAT` on stderr: text or json (or $"+logFormatEnv+")")
	flags.StringVar(&lf.level, "log-level", "info", "lowest log `LEVEL` written: debug, info, warn or error (or $"+logLevelEnv+")")

	// Chain whatever hook the root already has, so adding one elsewhere
	// does not silently drop the log set-up (or this file drop it).
	prev := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := setupLogging(cmd, lf); err != nil {
			return err
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}

// setupLogging installs the slog default handler the flags (or, for a flag
// not given, the environment) ask for, writing to the command's stderr.
func setupLogging(cmd *cobra.Command, lf logFlags) error {
	format := logSetting(cmd, "log-format", logFormatEnv, lf.format)
	level := logSetting(cmd, "log-level", logLevelEnv, lf.level)
	h, err := newLogHandler(cmd.ErrOrStderr(), format, level)
	if err != nil {
		return err
	}
	slog.SetDefault(slog.New(h))
	// At debug, say which settings won (flag, environment or default).
	slog.Debug("logging configured", "log_format", format.value, "log_format_from", format.from, "log_level", level.value, "log_level_from", level.from)
	return nil
}

// setting is one log option's value and where it came from, for errors.
type setting struct{ value, from string }

// logSetting is the flag's value when it was given, else the environment
// variable's when set, else the flag's default: the flag wins.
func logSetting(cmd *cobra.Command, flag, env, value string) setting {
	if cmd.Flags().Changed(flag) {
		return setting{value, "--" + flag}
	}
	if v := os.Getenv(env); v != "" {
		return setting{v, "--" + flag + " (from $" + env + ")"}
	}
	return setting{value, "--" + flag + " (default)"}
}

// newLogHandler builds the handler for format and level, or a usage error
// naming the flag and the values it takes.
func newLogHandler(w io.Writer, format, level setting) (slog.Handler, error) {
	lvl, ok := logLevels[strings.ToLower(level.value)]
	if !ok {
		return nil, usagef("%s %q: want debug, info, warn or error", level.from, level.value)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format.value) {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, usagef("%s %q: want text or json", format.from, format.value)
}
