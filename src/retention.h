/*
 * retention.h — the one door through which history rows leave the live
 * tables (gangsched.archive_history, docs/operations.md#retention).
 */
#ifndef GANGSCHED_RETENTION_H
#define GANGSCHED_RETENTION_H

extern void gs_retention_init(void);

#endif							/* GANGSCHED_RETENTION_H */
