/*
 * wake.h — asking for a scheduling round when the current transaction commits.
 */
#ifndef GANGSCHED_WAKE_H
#define GANGSCHED_WAKE_H

/* Hook for the background worker: called once after a commit that asked. */
typedef void (*gs_wake_hook_type) (void);
extern gs_wake_hook_type gs_wake_hook;

extern void gs_request_wake(void);

#endif							/* GANGSCHED_WAKE_H */
