driftscope show multi.tdump pooler
