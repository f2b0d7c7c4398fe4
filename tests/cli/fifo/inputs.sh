# A FIFO (or any non-regular file) as an input is refused at once, never waited on (issue 7,
# bug 8): every verb, and the files compare reads besides its dumps. `timeout` turns a hang into
# exit 124 instead of a stuck test.
mkfifo pipe.tdump pipe.toml
t() { timeout 10 driftscope "$@" 2>&1; echo "exit $?"; }
t ls pipe.tdump
t verify pipe.tdump
t info pipe.tdump
t show pipe.tdump embed
t filter pipe.tdump out.tdump
t export pipe.tdump out.npz
t import pipe.tdump out.tdump
t compare pipe.tdump run.tdump
t compare run.tdump pipe.tdump
t compare run.tdump run.tdump --reference64 pipe.tdump
t compare run.tdump run.tdump --policy pipe.toml
t compare run.tdump run.tdump --map-file pipe.toml
t ls .
t verify /dev/null
ls | grep -c "^out\." || true
