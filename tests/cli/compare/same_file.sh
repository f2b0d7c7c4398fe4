# A report path that is one of the inputs (the same path, a symlink or a hard link to it) is
# refused before anything is compared or written; the dumps stay as they were (issue 7, bug 4).
cp run.tdump orig.tdump
ln -s run.tdump link.json
ln multi.tdump hard.md
t() { driftscope "$@" 2>&1; echo "exit $?"; }
t compare run.tdump multi.tdump --json run.tdump
t compare run.tdump multi.tdump --json ./run.tdump
t compare run.tdump multi.tdump --json link.json
t compare run.tdump multi.tdump --markdown hard.md
t compare run.tdump run.tdump --reference64 multi.tdump --markdown hard.md
t compare run.tdump run.tdump --json same.out --markdown same.out
printf '[default]\nmin_cosine = 0.9\n' > policy.toml
t compare run.tdump run.tdump --policy policy.toml --json policy.toml
cmp run.tdump orig.tdump && echo "run.tdump unchanged"
test -L link.json && echo "link.json still a symlink"
# A different file is fine, and the report is written whole, with no temporary file left.
t compare run.tdump run.tdump -q --nan-equal --json r.json --markdown /dev/null
test -s r.json && ls | grep -c 'tmp' || true
