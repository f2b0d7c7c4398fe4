/* driftscope C ABI — see docs/c-api.md. */
#ifndef DRIFTSCOPE_H_
#define DRIFTSCOPE_H_
#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0" */
const char* ds_version(void);

#ifdef __cplusplus
}
#endif
#endif
