#!/bin/sh
# tools/agent/trainer.sh — a stand-in for a distributed training worker, for
# gangsched-agent's tests and demonstrations.
#
#   sh trainer.sh STEPS [SECONDS_PER_STEP]
#
# Each worker of a job runs it under gangsched-agent, which sets RANK,
# WORLD_SIZE, MASTER_ADDR, CUDA_VISIBLE_DEVICES, GANGSCHED_JOB and
# GANGSCHED_CHECKPOINT_DIR (shared by the job's workers). It advances a step
# counter; rank 0 keeps it in $GANGSCHED_CHECKPOINT_DIR/progress. On SIGTERM
# (a preemption, or the agent restarting the job's workers at a new world
# size: an elastic gang that grew or shrank) rank 0 writes the step to
# $GANGSCHED_CHECKPOINT_DIR/checkpoint and every rank exits 0; when the job
# is started again (at whatever WORLD_SIZE) every rank resumes from that
# checkpoint. After STEPS steps rank 0 writes a last checkpoint and
# every rank exits 0. Everything is logged, one line per event, to
# $GANGSCHED_CHECKPOINT_DIR/trainer.log.
# TRAINER_FAIL_AT=N makes every rank exit 3 at step N (a failing job);
# TRAINER_STOP_DELAY=S makes every rank take S seconds to stop on SIGTERM.
steps=${1:-100}
pause=${2:-0.1}
dir=${GANGSCHED_CHECKPOINT_DIR:?GANGSCHED_CHECKPOINT_DIR is not set}
rank=${RANK:-0}
log=$dir/trainer.log
ckpt=$dir/checkpoint

mkdir -p "$dir"
say() {
    echo "$(date '+%H:%M:%S.%N') job=${GANGSCHED_JOB:-?} rank=$rank node=${GANGSCHED_NODE:-?} pid=$$ $*" >> "$log"
}
save() {
    if [ "$rank" = 0 ]; then
        echo "$step" > "$ckpt.tmp.$$" && mv "$ckpt.tmp.$$" "$ckpt"
    fi
}

step=0
if [ -s "$ckpt" ]; then
    step=$(cat "$ckpt")
fi
echo $$ > "$dir/rank$rank.pid"
say "start step=$step world=${WORLD_SIZE:-1} local_rank=${LOCAL_RANK:-0} master=${MASTER_ADDR:-}:${MASTER_PORT:-} devices=${CUDA_VISIBLE_DEVICES:-}"
say "env gangsched_rank=${GANGSCHED_RANK-unset} gangsched_world_size=${GANGSCHED_WORLD_SIZE-unset} time_left=${GANGSCHED_TIME_LEFT-unset}"

stop=0
trap 'stop=1' TERM
while :; do
    if [ "$stop" = 1 ]; then
        # a checkpoint that takes a while to write (tests: an agent restarted meanwhile)
        [ -n "${TRAINER_STOP_DELAY:-}" ] && sleep "$TRAINER_STOP_DELAY"
        save
        say "checkpoint step=$step (SIGTERM)"
        exit 0
    fi
    if [ "$step" -ge "$steps" ]; then
        save
        say "done step=$step"
        exit 0
    fi
    if [ -n "${TRAINER_FAIL_AT:-}" ] && [ "$step" -ge "$TRAINER_FAIL_AT" ]; then
        say "failing at step=$step"
        exit 3
    fi
    sleep "$pause"
    [ "$stop" = 1 ] && continue     # the step was cut short by SIGTERM
    step=$((step + 1))
    if [ "$rank" = 0 ]; then
        echo "$step" > "$dir/progress"
    fi
done
